"""cigri: a grid meta-scheduler for bag-of-tasks campaigns."""

__version__ = "0.1.0"
