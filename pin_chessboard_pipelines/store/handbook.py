"""Reference data of the handbook replica (docs/store.md#handbook-replica) and the handbook topics
that keep its regions and cities current (docs/store.md#handbook-sync).

Covers every id the contract names and the simulator emits. Seeded by a migration (version 0);
handbook-sync applies the handbook service's values over it.
"""

from __future__ import annotations

COUNTRIES = [
    {"id": 643, "name": "Россия", "iso_code": "RUS"},
    {"id": 784, "name": "ОАЭ", "iso_code": "ARE"},
    {"id": 792, "name": "Турция", "iso_code": "TUR"},
    {"id": 764, "name": "Таиланд", "iso_code": "THA"},
    {"id": 360, "name": "Индонезия", "iso_code": "IDN"},
]

# regions are Russian federal subjects (docs/talent-source.md): a region new to the replica is Russia's
REGION_COUNTRY_ID = 643

REGIONS = [
    {"id": region_id, "country_id": REGION_COUNTRY_ID, "name": name}
    for region_id, name in {
        16: "Республика Татарстан",
        23: "Краснодарский край",
        39: "Калининградская область",
        50: "Московская область",
        54: "Новосибирская область",
        66: "Свердловская область",
        77: "Москва",
        78: "Санкт-Петербург",
    }.items()
]

CITIES = [
    {"id": 1, "region_id": 77, "name": "Москва"},
    {"id": 2, "region_id": 78, "name": "Санкт-Петербург"},
    {"id": 3, "region_id": 23, "name": "Сочи"},
    {"id": 4, "region_id": 23, "name": "Краснодар"},
    {"id": 5, "region_id": 16, "name": "Казань"},
    {"id": 6, "region_id": 66, "name": "Екатеринбург"},
    {"id": 7, "region_id": 54, "name": "Новосибирск"},
    {"id": 8, "region_id": 39, "name": "Калининград"},
    {"id": 9, "region_id": 50, "name": "Красногорск"},
]

CURRENCIES = [
    {"id": 643, "iso_code": "RUB", "name": "Российский рубль", "sign": "₽"},
    {"id": 840, "iso_code": "USD", "name": "Доллар США", "sign": "$"},
    {"id": 978, "iso_code": "EUR", "name": "Евро", "sign": "€"},
    {"id": 784, "iso_code": "AED", "name": "Дирхам ОАЭ", "sign": "د.إ"},
]

# The handbook service's compacted topics (key = the id as a decimal string, value UTF-8 JSON).
REGIONS_TOPIC = "pin.handbook.regions.v1"  # {id, name, version}
CITIES_TOPIC = "pin.handbook.cities.v1"  # {id, regionId, name, version}
HANDBOOK_TOPICS = (REGIONS_TOPIC, CITIES_TOPIC)
HANDBOOK_CONSUMER_GROUP = "pin-chessboard-handbook-sync"
