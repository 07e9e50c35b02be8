"""d2lattn's version, in a module of its own: what a release records (see
:func:`d2lattn.grading.releasing.stamp`) is read without importing MXNet or a model."""
__version__ = "0.1.0"
