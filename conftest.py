"""Root conftest: registers the properties pytest plugin (options --backend, --profile, ...)
for every test run from the repository, so `pytest -n 2 --profile quick` works here."""
pytest_plugins = ["properties.plugin"]
