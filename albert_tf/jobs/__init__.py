"""One module per command: XConfig (the settings, whose fields make the flags), x(config) -> XResult."""
