"""The `autospec` command: parse -> config -> library call -> render (`main.main`)."""
