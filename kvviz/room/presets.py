"""The shared room's fixed texts: its prompt presets and the server log's presenter-key banner.

Data, not UI text: a preset is fed to the model, and must be the same in every language so sessions in
different languages share blocks; its key is UI text, shown through the app's catalog (``tr``). The banner
is printed once per process in the server's terminal.
"""

# {label (UI text, through tr()): the prompt fed to the model}
PRESETS = {
    "Workshop assistant: ask about caching": (
        "You are the workshop assistant for a hands-on session on prompt caching in large language model "
        "servers. Answer briefly, cite the block size when it matters, and say when you are unsure.\n\n"
        "Question: why does changing one early character make every later block miss?"
    ),
    "Workshop assistant: ask about salts": (
        "You are the workshop assistant for a hands-on session on prompt caching in large language model "
        "servers. Answer briefly, cite the block size when it matters, and say when you are unsure.\n\n"
        "Question: what does a cache salt protect against?"
    ),
    "Something of your own": "",
}
PRESENTER_KEY_LOG = (
    "\n  kvviz room: the presenter key (needed to reset the shared room) is\n"
    "      {key}\n"
    "  generated for this server; set KVVIZ_PRESENTER_KEY to choose your own. Room page:\n"
    "      {url}\n"
)
PRESENTER_KEY_LOG_ENV = "\n  kvviz room: resetting the shared room needs KVVIZ_PRESENTER_KEY. Room page: {url}\n"
