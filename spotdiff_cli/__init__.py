"""spotdiff: say, in plain sentences, what changed between two images.

The library is importable without the heavy dependencies (torch, timm, sklearn): they load
lazily where they are used, so ``spotdiff --help`` answers at once.
"""

__version__ = "0.1.0"
