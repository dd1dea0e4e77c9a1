"""Makes sure the properties pytest plugin (--backend, --profile, fixtures) is active.

The repository's root conftest.py registers ``properties.plugin``; if it
does not (or pytest runs from elsewhere), register it here.
"""
import properties.plugin


def pytest_addoption(parser, pluginmanager):
    if not pluginmanager.has_plugin("properties.plugin") and not pluginmanager.is_registered(
            properties.plugin):
        pluginmanager.register(properties.plugin, "properties.plugin")
