"""The synthetic Talent dataset: determinism, ids, paging, filters and knobs, with no I/O."""

from __future__ import annotations

import tracemalloc
import uuid
from collections import Counter, defaultdict
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pin_chessboard_pipelines.entities import COLLECTIONS
from pin_chessboard_pipelines.errors import DatasetError, InvalidQuery, UnknownCollection
from pin_chessboard_pipelines.store.handbook import CITIES, COUNTRIES, CURRENCIES
from pin_chessboard_pipelines.talent.simulator import dataset as ds
from pin_chessboard_pipelines.talent.simulator import items as snapshots
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec, FaultRule

SMALL = DatasetSpec(
    seed=7,
    developers=3,
    projects_per_developer=2,
    buildings_per_project=3,
    layout_groups_per_project=2,
    layouts_per_project=8,
    objects_per_project=40,
)
CITY_REGION = {c["id"]: c["region_id"] for c in CITIES}


def walk(spec: DatasetSpec, collection: str, limit: int, **filters: str) -> list[dict]:
    items: list[dict] = []
    cursor = None
    while True:
        page, cursor = ds.list_page(spec, collection, cursor, limit, **filters)
        assert len(page) <= limit
        items.extend(page)
        if cursor is None:
            return items


def everything(spec: DatasetSpec) -> dict[str, list[dict]]:
    return {c: list(ds.iter_items(spec, c)) for c in COLLECTIONS}


def test_same_seed_same_items_other_seed_other_ids():
    assert everything(SMALL) == everything(DatasetSpec(**{**SMALL.__dict__}))
    other = everything(DatasetSpec(**{**SMALL.__dict__, "seed": 8}))
    for collection, items in everything(SMALL).items():
        assert {i["id"] for i in items}.isdisjoint(i["id"] for i in other[collection])


def test_ids_are_uuids_that_decode_back_to_collection_and_index():
    ids = set()
    for collection in COLLECTIONS:
        for index in range(ds.count(SMALL, collection)):
            talent_id = ds.entity_id(SMALL, collection, index)
            parsed = uuid.UUID(talent_id)
            assert str(parsed) == talent_id
            assert parsed.version == 8 and parsed.variant == uuid.RFC_4122
            assert ds.decode_id(SMALL, talent_id) == (collection, index)
            assert ds.decode_id(SMALL, talent_id.upper()) == (collection, index)
            ids.add(talent_id)
    assert len(ids) == sum(ds.count(SMALL, c) for c in COLLECTIONS)


@pytest.mark.parametrize(
    "talent_id",
    ["", "nope", str(uuid.uuid4()), "00000000-0000-0000-0000-000000000000", None],
    # ids of their own: the random UUID's would differ between pytest-xdist workers' collections
    ids=["empty", "not-a-uuid", "random-uuid4", "nil-uuid", "none"],
)
def test_foreign_ids_decode_to_none(talent_id):
    assert ds.decode_id(SMALL, talent_id) is None


def test_an_index_past_the_end_is_not_an_id_of_the_dataset():
    past = ds.entity_id(SMALL, "developers", SMALL.developers)
    assert ds.decode_id(SMALL, past) is None
    assert ds.index_of(SMALL, "projects", ds.entity_id(SMALL, "developers", 0)) is None


@pytest.mark.parametrize("limit", [1, 3, 7, 40, 2000])
@pytest.mark.parametrize("collection", COLLECTIONS)
def test_paging_walks_every_item_once_in_index_order(collection, limit):
    assert walk(SMALL, collection, limit) == list(ds.iter_items(SMALL, collection))


@settings(max_examples=40, deadline=None)
@given(
    developers=st.integers(0, 3),
    per_developer=st.integers(1, 3),
    buildings=st.integers(1, 3),
    objects=st.integers(0, 17),
    limit=st.integers(1, 9),
)
def test_paging_holds_for_any_shape(developers, per_developer, buildings, objects, limit):
    spec = DatasetSpec(
        developers=developers,
        projects_per_developer=per_developer,
        buildings_per_project=buildings,
        objects_per_project=objects,
    )
    items = walk(spec, "property-objects", limit)
    assert [i["id"] for i in items] == [ds.entity_id(spec, "property-objects", n) for n in range(len(items))]
    assert len(items) == developers * per_developer * objects == ds.count(spec, "property-objects")


def test_a_page_can_be_fetched_again_with_its_cursor():
    _, cursor = ds.list_page(SMALL, "property-objects", None, 25)
    assert ds.list_page(SMALL, "property-objects", cursor, 25) == ds.list_page(
        SMALL, "property-objects", cursor, 25
    )
    assert ds.page_number(SMALL, "property-objects", cursor, 25) == 1
    assert ds.page_number(SMALL, "property-objects", None, 25) == 0


@pytest.mark.parametrize(
    "cursor",
    ["!!!", "bm90LWEtY3Vyc29y", ds.encode_cursor("projects", 1), ds.encode_cursor("property-objects", 10**6)],
)
def test_a_foreign_cursor_is_an_invalid_query(cursor):
    with pytest.raises(InvalidQuery):
        ds.list_page(SMALL, "property-objects", cursor, 10)


def test_a_cursor_outside_the_filtered_range_is_an_invalid_query():
    project = ds.entity_id(SMALL, "projects", 1)
    _, cursor = ds.list_page(SMALL, "property-objects", None, 10)  # index 10 lies in project 0
    with pytest.raises(InvalidQuery):
        ds.list_page(SMALL, "property-objects", cursor, 10, project_id=project)


def test_invalid_queries():
    with pytest.raises(UnknownCollection):
        ds.list_page(SMALL, "flats", None, 10)
    with pytest.raises(InvalidQuery):
        ds.list_page(SMALL, "projects", None, 0)
    developer, project = ds.entity_id(SMALL, "developers", 0), ds.entity_id(SMALL, "projects", 0)
    with pytest.raises(InvalidQuery):
        ds.list_page(SMALL, "projects", None, 10, developer_id=developer, project_id=project)


def test_developer_filter_keeps_what_belongs_to_the_developer():
    items = everything(SMALL)
    project_of_building = {b["id"]: b["projectId"] for b in items["buildings"]}
    developer = ds.entity_id(SMALL, "developers", 1)
    projects = walk(SMALL, "projects", 5, developer_id=developer)
    assert len(projects) == SMALL.projects_per_developer
    assert {p["developerId"] for p in projects} == {developer}
    project_ids = {p["id"] for p in projects}
    assert [d["id"] for d in walk(SMALL, "developers", 5, developer_id=developer)] == [developer]
    for collection in ("buildings", "layout-groups", "layouts"):
        filtered = walk(SMALL, collection, 4, developer_id=developer)
        expected = [i for i in items[collection] if i["projectId"] in project_ids]
        assert filtered == expected and filtered
    objects = walk(SMALL, "property-objects", 13, developer_id=developer)
    assert objects == [
        o for o in items["property-objects"] if project_of_building[o["buildingId"]] in project_ids
    ]
    assert len(objects) == SMALL.projects_per_developer * SMALL.objects_per_project


def test_project_filter_keeps_what_belongs_to_the_project():
    project = ds.item(SMALL, "projects", 3)
    by_project = {"projectId": project["id"]}
    assert walk(SMALL, "developers", 5, project_id=project["id"]) == [
        ds.item(SMALL, "developers", 3 // SMALL.projects_per_developer)
    ]
    assert walk(SMALL, "projects", 5, project_id=project["id"]) == [project]
    buildings = walk(SMALL, "buildings", 2, project_id=project["id"])
    assert len(buildings) == SMALL.buildings_per_project
    assert all(b.items() >= by_project.items() for b in buildings)
    building_ids = {b["id"] for b in buildings}
    objects = walk(SMALL, "property-objects", 11, project_id=project["id"])
    assert len(objects) == SMALL.objects_per_project
    assert {o["buildingId"] for o in objects} == building_ids
    assert ds.count(SMALL, "layouts", project_id=project["id"]) == SMALL.layouts_per_project


@pytest.mark.parametrize("collection", COLLECTIONS)
def test_unknown_filter_ids_give_an_empty_listing(collection):
    stranger = str(uuid.uuid4())
    wrong_kind = ds.entity_id(SMALL, "buildings", 0)
    for filters in ({"developer_id": stranger}, {"project_id": stranger}, {"project_id": wrong_kind}):
        assert ds.list_page(SMALL, collection, None, 10, **filters) == ([], None)
        assert ds.count(SMALL, collection, **filters) == 0


def test_by_ids_returns_known_property_objects_in_the_order_asked_once_each():
    a, b = ds.entity_id(SMALL, "property-objects", 5), ds.entity_id(SMALL, "property-objects", 200)
    others = [
        str(uuid.uuid4()),
        ds.entity_id(SMALL, "buildings", 0),
        ds.entity_id(SMALL, "property-objects", 10**6),
    ]
    items = ds.by_ids(SMALL, [b, *others, a, b])
    assert items == [ds.item(SMALL, "property-objects", 200), ds.item(SMALL, "property-objects", 5)]
    assert ds.by_ids(SMALL, []) == []


def _decimal(value: object) -> Decimal:
    assert isinstance(value, str | int | float) and not isinstance(value, bool)
    return Decimal(str(value))


def test_snapshots_keep_the_contract_for_non_poison_items():
    items = everything(DatasetSpec.preset("demo"))
    ids = {c: {i["id"]: i for i in items[c]} for c in COLLECTIONS}
    countries, currencies = {c["id"] for c in COUNTRIES}, {c["id"] for c in CURRENCIES}
    for collection in COLLECTIONS:
        for entity in items[collection]:
            assert entity["version"] >= 1 and entity["deletedAt"] is None
            assert 1 <= len(entity["name"]) <= 256 if "name" in entity else True
    for d in items["developers"]:
        assert d["inn"] is None or (d["inn"].isdigit() and len(d["inn"]) in (10, 12))
    for p in items["projects"]:
        assert p["developerId"] in ids["developers"]
        assert p["type"] in snapshots.PROJECT_TYPES and p["class"] in snapshots.PROJECT_CLASSES
        assert p["constructionStatus"] in snapshots.CONSTRUCTION_STATUSES
        assert p["countryId"] in countries and p["currencyId"] in currencies
        if p["cityId"] is not None:
            assert CITY_REGION[p["cityId"]] == p["regionId"]
        assert p["regionId"] is None or p["regionId"] in CITY_REGION.values()
        assert (p["stars"] is not None) == (p["type"] in ("ApartHotel", "Hotel"))
        assert p["stars"] is None or 1 <= p["stars"] <= 5
        assert p["paybackYears"] is None or _decimal(p["paybackYears"]) > 0
    for b in items["buildings"]:
        assert b["projectId"] in ids["projects"] and 1 <= b["floorsCount"] <= 200
    for g in items["layout-groups"]:
        assert g["projectId"] in ids["projects"] and 0 <= g["rooms"] <= 10
    for lay in items["layouts"]:
        assert 0 < _decimal(lay["totalArea"]) <= 10000 and 0 <= lay["rooms"] <= 10
        if lay["layoutGroupId"] is not None:
            assert ids["layout-groups"][lay["layoutGroupId"]]["projectId"] == lay["projectId"]
    numbers: dict[str, set[str]] = defaultdict(set)
    for o in items["property-objects"]:
        building = ids["buildings"][o["buildingId"]]
        assert 1 <= o["floor"] <= building["floorsCount"] and 1 <= o["section"] <= 100
        assert 1 <= len(o["number"]) <= 32 and o["number"] not in numbers[o["buildingId"]]
        numbers[o["buildingId"]].add(o["number"])
        assert o["status"] in snapshots.OBJECT_STATUSES
        assert o["price"] is None or 0 <= _decimal(o["price"]) <= 10**12
        assert o["totalArea"] is None or 0 < _decimal(o["totalArea"]) <= 10000
        if o["layoutId"] is not None:
            assert ids["layouts"][o["layoutId"]]["projectId"] == building["projectId"]
    # The mix a realistic chessboard has: optional links left out sometimes, statuses spread.
    assert any(lay["layoutGroupId"] is None for lay in items["layouts"])
    assert any(o["layoutId"] is None for o in items["property-objects"])
    assert any(o["price"] is None for o in items["property-objects"])
    assert {type(p["paybackYears"]) for p in items["projects"]} >= {str, float}
    statuses = Counter(o["status"] for o in items["property-objects"])
    assert set(statuses) == set(snapshots.OBJECT_STATUSES)
    assert 0.5 < statuses["Free"] / len(items["property-objects"]) < 0.7
    assert any(p["countryId"] != 643 for p in items["projects"])


def test_poison_every_breaks_one_rule_per_poison_object():
    spec = DatasetSpec(**{**SMALL.__dict__, "poison_every": 4})
    objects = list(ds.iter_items(spec, "property-objects"))
    floors = {b["id"]: b["floorsCount"] for b in ds.iter_items(spec, "buildings")}
    kinds = Counter()
    for index, o in enumerate(objects):
        kind = ds.poison_kind(spec, index)
        assert (kind is not None) == ((index + 1) % 4 == 0)
        clean = ds.item(SMALL, "property-objects", index)
        if kind == "floor":
            assert not -5 <= o["floor"] <= 200
        elif kind == "price":
            assert _decimal(o["price"]) < 0
        elif kind == "duplicate-number":
            previous = objects[index - 1]
            assert (o["number"], o["buildingId"]) == (previous["number"], previous["buildingId"])
            assert previous["deletedAt"] is None and ds.poison_kind(spec, index - 1) is None
        else:
            assert o == clean and 1 <= o["floor"] <= floors[o["buildingId"]]
        kinds[kind] += 1
    assert set(kinds) == {None, *snapshots.POISON_KINDS}


def test_unknown_enum_every_uses_values_outside_the_lists():
    spec = DatasetSpec(**{**SMALL.__dict__, "unknown_enum_every": 2})
    projects = list(ds.iter_items(spec, "projects"))
    for index, p in enumerate(projects):
        field = ds.unknown_enum_field(spec, "projects", index)
        lists = {
            "type": snapshots.PROJECT_TYPES,
            "class": snapshots.PROJECT_CLASSES,
            "constructionStatus": snapshots.CONSTRUCTION_STATUSES,
        }
        for name, values in lists.items():
            assert (p[name] not in values) == (name == field)
    assert {ds.unknown_enum_field(spec, "projects", i) for i in range(6)} == {
        None,
        "type",
        "class",
        "constructionStatus",
    }
    statuses = [o["status"] for o in ds.iter_items(spec, "property-objects")]
    assert statuses[1::2] == [snapshots.UNKNOWN_OBJECT_STATUS] * (len(statuses) // 2)
    assert snapshots.UNKNOWN_OBJECT_STATUS not in statuses[0::2]


def test_deleted_every_marks_every_nth_item_of_each_collection():
    spec = DatasetSpec(**{**SMALL.__dict__, "deleted_every": 3})
    for collection in COLLECTIONS:
        deleted = [i["deletedAt"] is not None for i in ds.iter_items(spec, collection)]
        assert deleted == [(n + 1) % 3 == 0 for n in range(len(deleted))]
    stamp = ds.item(spec, "layouts", 2)["deletedAt"]
    assert stamp.endswith("Z") and stamp[4] == "-" and "T" in stamp


def test_unknown_reference_every_leaves_region_or_city_unknown():
    spec = DatasetSpec(**{**SMALL.__dict__, "unknown_reference_every": 2})
    for index, p in enumerate(ds.iter_items(spec, "projects")):
        fields = snapshots.unknown_reference_fields(spec, index)
        for name in ("regionId", "cityId"):
            assert (p[name] == snapshots.UNKNOWN_REFERENCE_ID) == (name in fields)
        if fields:
            assert p["countryId"] == 643


def test_version_knob_is_a_newer_generation_of_the_same_data():
    newer = DatasetSpec(**{**SMALL.__dict__, "version": 5})
    for collection in COLLECTIONS:
        for old, new in zip(ds.iter_items(SMALL, collection), ds.iter_items(newer, collection), strict=True):
            assert new["version"] == old["version"] + 4
            assert {**new, "version": 0} == {**old, "version": 0}


def test_1m_preset_is_arithmetic_not_memory():
    spec = DatasetSpec.preset("1m")
    tracemalloc.start()
    try:
        assert ds.count(spec, "property-objects") == 1_000_000
        assert ds.count(spec, "projects") == 10_000 and ds.count(spec, "developers") == 100
        assert ds.count(spec, "buildings") == 50_000 and ds.count(spec, "layouts") == 100_000
        last = ds.entity_id(spec, "property-objects", 999_999)
        assert ds.decode_id(spec, last) == ("property-objects", 999_999)
        developer = ds.entity_id(spec, "developers", 99)
        assert ds.count(spec, "property-objects", developer_id=developer) == 10_000
        assert ds.count(spec, "property-objects", project_id=ds.entity_id(spec, "projects", 9_999)) == 100
        _, cursor = ds.list_page(
            spec, "property-objects", ds.encode_cursor("property-objects", 998_000), 2000
        )
        assert cursor is None
        assert ds.by_ids(spec, [last])[0]["id"] == last
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 10 * 2**20


def test_presets_and_overrides():
    assert DatasetSpec.preset("tiny") == DatasetSpec()
    demo = DatasetSpec.preset("demo")
    assert ds.count(demo, "property-objects") == 1200
    spec = demo.with_overrides(
        ["poison-every=5", "seed=9", "faults=property-objects:1:503:2,projects:0:malformed"]
    )
    assert spec.poison_every == 5 and spec.seed == 9 and spec.developers == 3
    assert spec.faults == (
        FaultRule("property-objects", 1, "503", 2),
        FaultRule("projects", 0, "malformed", 1),
    )
    assert DatasetSpec(faults=(("layouts", 0, "429", 1),)).faults == (FaultRule("layouts", 0, "429", 1),)


@pytest.mark.parametrize(
    "pair",
    [
        "poison_every",
        "colour=red",
        "poison_every=x",
        "developers=-1",
        "version=0",
        "faults=projects:0",
        "faults=x:0:503",
    ],
)
def test_invalid_overrides_say_what_is_wrong(pair):
    with pytest.raises(DatasetError) as error:
        DatasetSpec().with_overrides([pair])
    assert "\n" not in str(error.value) and str(error.value)


def test_unknown_preset():
    with pytest.raises(DatasetError, match="unknown dataset preset 'huge'"):
        DatasetSpec.preset("huge")
