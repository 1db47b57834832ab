"""The KV-bytes calculator's model input: a preset, typed numbers (each refused in words when out of range)
or a config.json, as a ModelShape for kvviz.analysis.sizes.kv_formula."""

from __future__ import annotations

import streamlit as st

from kvviz.analysis.sizes import kvsize
from kvviz.analysis.sizes.hf_config import ParsedConfig, parse_config_text
from kvviz.analysis.sizes.kvsize import KVSizeError, ModelShape
from kvviz.analysis.sizes.presets import (
    EXAMPLE_CONFIGS,
    PRESETS,
    PRESETS_BY_KEY,
    Preset,
    example_config_text,
)
from kvviz.util.blank import is_blank
from kvviz_app.shell import ui
from kvviz_app.shell.i18n import texts, tr

T = texts("calculator")
TC = texts("calculator_config")



# ----------------------------------------------------------------------------- model input


def _load_example() -> None:
    name = st.session_state.get("calc_example")
    if name:
        st.session_state["calc_config_text"] = example_config_text(name)


def _preset_input() -> tuple[ModelShape, Preset, None]:
    key = st.selectbox(T.PRESET_LABEL, [p.key for p in PRESETS], key="calc_preset",
                       format_func=lambda k: tr(PRESETS_BY_KEY[k].label))
    preset = PRESETS_BY_KEY[key]
    st.caption(T.SOURCE.format(source=tr(preset.source)))
    return preset.shape(), preset, None


#: The typed fields: widget key -> (label name in kvviz_app.calculator.text, lowest, highest, default). The fields
#: have no min/max of their own: the browser would keep an out-of-range number in the field (a red icon)
#: and never send it, so the page would go on computing from the previous value. Here every number
#: reaches the page and an out-of-range one is refused in words, with nothing computed from it.
TYPED_FIELDS = {
    "calc_layers": ("TYPED_LAYERS", 1, kvsize.MAX_LAYERS, 32),
    "calc_heads": ("TYPED_HEADS", 1, kvsize.MAX_HEADS, 32),
    "calc_kv_heads": ("TYPED_KV_HEADS", 1, kvsize.MAX_HEADS, 8),
    "calc_head_dim": ("TYPED_HEAD_DIM", 1, kvsize.MAX_HEAD_DIM, 128),
    "calc_d_model": ("TYPED_D_MODEL", 0, kvsize.MAX_D_MODEL, 0),
    "calc_window": ("TYPED_WINDOW", 1, kvsize.MAX_WINDOW, 4096),
    "calc_rank": ("TYPED_RANK", 1, kvsize.MAX_HEAD_DIM, 512),
    "calc_rope": ("TYPED_ROPE", 0, kvsize.MAX_HEAD_DIM, 64),
}


def _number(where, key: str, disabled: bool = False) -> int:
    name, _low, _high, default = TYPED_FIELDS[key]
    st.session_state.setdefault(key, default)  # no value of its own: a link may have set the key
    return int(where.number_input(getattr(T, name), step=1, key=key, disabled=disabled))


def _out_of_range(values: dict[str, int]) -> str | None:
    """The first typed number outside its field's range, as one line in the session's language."""
    for key, value in values.items():
        name, low, high, _default = TYPED_FIELDS[key]
        try:
            kvsize.check_count(key, value, low=low, high=high)
        except KVSizeError:
            return T.TYPED_OUT_OF_RANGE.format(field=getattr(T, name), value=ui.loc(f"{value:,}"),
                                               low=ui.loc(f"{low:,}"), high=ui.loc(f"{high:,}"))
    return None


def _typed_input() -> ModelShape | None:
    c = st.columns(5, vertical_alignment="bottom")  # the fields in one line under labels of 1-3 lines
    values = {key: _number(c[i], key) for i, key in enumerate(list(TYPED_FIELDS)[:5])}
    # three columns a row: at 1024 px a quarter column split in two broke "qk_rope_head_dim" mid-word
    c = st.columns(3)
    sliding = c[0].checkbox(T.TYPED_SLIDING, key="calc_sliding")
    if sliding:
        values["calc_window"] = _number(c[1], "calc_window")
    else:
        _number(c[1], "calc_window", disabled=True)
    c = st.columns(3)
    mla = c[0].checkbox(T.TYPED_MLA, key="calc_mla")
    for i, key in enumerate(("calc_rank", "calc_rope"), start=1):
        if mla:
            values[key] = _number(c[i], key)
        else:
            _number(c[i], key, disabled=True)
    if refused := _out_of_range(values):
        st.error(refused, icon=":material/error:")
        return None
    try:
        return kvsize.shape_from_counts(
            T.TYPED_NAME, values["calc_layers"], values["calc_kv_heads"], values["calc_head_dim"],
            heads=values["calc_heads"], d_model=values["calc_d_model"] or None, window=values.get("calc_window"),
            kv_lora_rank=values.get("calc_rank"), qk_rope_head_dim=values.get("calc_rope"),
        )
    except KVSizeError as exc:
        st.error(T.INPUT_ERROR.format(error=TC.size_error(exc)), icon=":material/error:")
        return None


def _config_input() -> ParsedConfig | None:
    c = st.columns([1, 1])
    upload = c[0].file_uploader(T.UPLOAD_LABEL, type=["json"], key="calc_upload")
    c[1].selectbox(T.EXAMPLE_LABEL, [""] + list(EXAMPLE_CONFIGS), key="calc_example", on_change=_load_example,
                   format_func=lambda n: n or T.EXAMPLE_NONE)
    text = st.text_area(T.PASTE_LABEL, key="calc_config_text", height=160, placeholder=T.PASTE_PLACEHOLDER)
    try:
        if upload is not None:
            if not is_blank(text):
                st.caption(T.UPLOAD_WINS.format(name=upload.name))
            parsed = parse_config_text(upload.getvalue(), upload.name)
        elif not is_blank(text):
            parsed = parse_config_text(text, T.PASTED_NAME)
        else:
            st.info(T.CONFIG_EMPTY, icon=":material/upload_file:")
            return None
    except KVSizeError as exc:
        st.error(T.CONFIG_ERROR.format(error=TC.size_error(exc)), icon=":material/error:")
        return None
    family = TC.FAMILY_GENERIC if parsed.family == "generic" else parsed.family
    st.caption(T.CONFIG_READ.format(family=family, model_type=parsed.model_type or TC.UNKNOWN_MODEL_TYPE))
    return parsed


def choose_model() -> tuple[ModelShape | None, Preset | None, ParsedConfig | None]:
    labels = {"preset": T.MODE_PRESET, "typed": T.MODE_TYPED, "config": T.MODE_CONFIG}  # values are codes
    mode = st.radio(T.INPUT_LABEL, list(labels), horizontal=True, key="calc_mode", format_func=labels.get)
    if mode == "typed":
        return _typed_input(), None, None
    if mode == "config":
        parsed = _config_input()
        return (parsed.shape if parsed else None), None, parsed
    return _preset_input()


