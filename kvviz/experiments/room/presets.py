"""The shared room's fixed texts: its prompt presets and the server log's presenter-key banner.

Data, not UI text: a preset is fed to the model, in the session's language (``preset_prompt``): sessions
in one language share its blocks (a room of Russian speakers shares the Russian system prompt, as a room
of English speakers the English one); its key is UI text, shown through the app's catalog (``tr``). The
banner is printed once per process in the server's terminal.
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
_SYSTEM_RU = (
    "Ты ассистент практического занятия о кэшировании промптов в серверах больших языковых моделей. Отвечай "
    "кратко, называй размер блока, когда он важен, и говори, когда не уверен.\n\n"
)
#: {language: {label: prompt}}: the presets' prompts in other languages (English: PRESETS).
PROMPTS_BY_LANG = {
    "ru": {
        "Workshop assistant: ask about caching": (
            _SYSTEM_RU + "Вопрос: почему изменение одного символа в начале промпта даёт промах во всех следующих блоках?"
        ),
        "Workshop assistant: ask about salts": _SYSTEM_RU + "Вопрос: от чего защищает соль кэша?",
        "Something of your own": "",
    },
}


def preset_prompt(label: str, lang: str = "en") -> str:
    """The prompt of the preset ``label`` in ``lang`` (English where the language has none); "" if unknown."""
    return PROMPTS_BY_LANG.get(lang, {}).get(label, PRESETS.get(label, ""))
PRESENTER_KEY_LOG = (
    "\n  kvviz room: the presenter key (needed to reset the shared room) is\n"
    "      {key}\n"
    "  generated for this server; set KVVIZ_PRESENTER_KEY to choose your own. Room page:\n"
    "      {url}\n"
)
PRESENTER_KEY_LOG_ENV = "\n  kvviz room: resetting the shared room needs KVVIZ_PRESENTER_KEY. Room page: {url}\n"
