# The package version, read by __init__.py and by setuptools (pyproject.toml: dynamic version).
__version__ = "0.1.0"
