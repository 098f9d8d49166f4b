# Marks the distribution as binary: the package ships a compiled module (built by CMake, not by
# setuptools), so its wheel must be tagged for this Python and platform and installed into
# platlib, not be taken for pure Python. Everything else is in pyproject.toml.
from setuptools import setup
from setuptools.dist import Distribution


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True


setup(distclass=BinaryDistribution)
