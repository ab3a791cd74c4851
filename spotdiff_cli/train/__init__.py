"""Training the learned captioners: recipes, batches, the loop (readable top to bottom) and
distributed launch helpers. ``from spotdiff_cli.train import train, TrainConfig``."""

from .recipes import TrainConfig, default_recipe_path, load_recipe

__all__ = ["TrainConfig", "load_recipe", "default_recipe_path", "train"]


def __getattr__(name: str):  # the loop imports torch: load it only when asked for
    if name == "train":
        from .loop import train

        return train
    raise AttributeError(name)
