"""Commands of this group register on collsim.cli.app.app."""
