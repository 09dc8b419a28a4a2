pytest_plugins = [
    "tests.fixtures.postgres",
    "tests.fixtures.kafka",
    "tests.fixtures.talent_sim",
]
