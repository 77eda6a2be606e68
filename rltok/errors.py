"""The one exception type a user can cause; the CLI prints its message as a single sentence."""


class UserError(Exception):
    """A problem with the user's input (a path, a flag, a checkpoint) and how to fix it."""
