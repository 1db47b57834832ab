"""Every user-facing string of the app, one module per page, so a translation can follow.

Pages import their strings from here and never hard-code UI text.
"""
