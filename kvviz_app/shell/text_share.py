"""Strings of the workshop layer: shareable links, presenter mode, the join panel, guided paths,
predict-then-reveal (ui_share.py, ui_present.py)."""

# Shareable links
COPY_LINK = "Copy link"
COPY_LINK_HELP = (
    "This page with everything set as it is now. Copy it (button at the right of the box) and send it: "
    "whoever opens it sees the same picture."
)
TOO_LONG_TO_SHARE = (
    "Some text here is too long for a link (more than {limit} characters): the link leaves it out and "
    "opens with the page's own text. Send the text itself separately."
)
BAD_PARAMS = "The link had values this page cannot use ({names}); their defaults are shown instead."

# Presenter mode
SIDEBAR_HEADER = "Workshop"
PRESENT_TOGGLE = "Presenter mode"
PRESENT_HELP = (
    "For a projector: larger text and charts, explanations folded away, each page's key picture first, "
    "the sidebar collapsed. Also opened by adding ?present=1 to a link."
)
PRESENT_NOTE = "Presenter mode: explanations are folded below; the picture comes first."
EXPLAIN = "Explanation"
PICTURE_MOVED = "The key picture of this section is shown at the top of the page (presenter mode)."

# Join panel
JOIN_HEADER = "Join from your laptop or phone"
JOIN_TEXT = "Open **{url}** in a browser on the same network, or scan the code."
JOIN_LOCAL = (
    "No network address found: this server is reachable only from this machine. Serve the LAN with "
    "`make run HOST=0.0.0.0`."
)
JOIN_LOOPBACK = (
    "This server listens on localhost only, so the address above will not answer from other machines: "
    "restart it with `make run HOST=0.0.0.0`."
)
JOIN_QR_ALT = "QR code for {url}"

# Guided paths
# The landing page's first block: where a newcomer starts (the hero demo), before the guided paths.
START_HERE = (
    "**New here? Start with one character.** Change one letter of a prompt and see which of its cached "
    "blocks the real model can still reuse, and why the rest must be computed again."
)
START_LINK = "Start here: Edit one character"
PATHS_HEADER = "Guided paths"
PATHS_INTRO = "An order through the pages, each step opened with its settings and one question to think about."
PATH_LABEL = "Path"
PATH_NAMES = {
    "workshop": "Workshop in 45 minutes",
    "self": "Self-study",
}
PATH_NONE = "Start anywhere"
PATH_TOTAL = "{steps} steps, about {minutes} minutes."
STEP_LINE = "{n}. {title} ({minutes} min)"
STEP_ASK = "Ask: {question}"
NEXT_LINK = "Next: {title}"
NEXT_QUESTION = "Question for this step: {question}"
PATH_DONE = "This is the last step of the path. Back to the start:"
PATH_STEP_OF = "Step {n} of {total} of “{path}”."

# One question per step, asked before the page shows the answer.
QUESTIONS = {
    "home": "What does a prompt cache keep: the text, the answer, or something else?",
    "edit": "One character changes near the start of the prompt. Which blocks can still be reused?",
    "edit_late": "Now the change is near the end. How much of the prompt is reused?",
    "calculator": "How much KV memory do 100 users with 1,000 tokens each need on Llama-2-7B?",
    "calculator_gqa": "Why does Llama-3-8B need a quarter of Llama-2-7B's bytes per token?",
    "paging": "Where does reserving a whole contiguous slab per request waste memory?",
    "block_table": "The pool is full. Which block does the next allocation evict, and why that one?",
    "radix": "Which structure keeps the partial block at the end of a prompt, and what does it cost?",
    "sessions": "Turn 5 of a chat: which tokens are read from the cache and which are written?",
    "room": "You and your neighbour send the same system prompt. Who computes it, and what does a salt change?",
    "side_channel": "Can someone tell from the response time that you sent this prompt before?",
    "collisions": "Why is the block hash SHA-256 and not Python's hash()?",
}

# Predict, then reveal
PREDICT_TOGGLE = "Predict first"
PREDICT_HELP = "Guess the answer before the page shows it, then see whether you were right."
PREDICT_HEADER = "Your prediction"
PREDICT_REVEAL = "Reveal"
PREDICT_SKIP = "Show the answer"
PREDICT_WAITING = "Make your prediction above and press **Reveal**: the answer is below it."
PREDICT_RIGHT = "Right: {answer}."
PREDICT_WRONG = "Not quite: you said {guess}, the answer is {answer}."
EDIT_Q_BLOCK = "Which block of B is the first one that misses the cache?"
EDIT_Q_BLOCK_NONE = "none (all blocks hit)"
EDIT_Q_BLOCK_OPTION = "block {i} (tokens {lo}–{hi})"
EDIT_Q_TOKENS = "How many of B's {total} tokens are reused from A's cache?"
EDIT_A_BLOCK = "the first miss is {answer}"
EDIT_A_TOKENS = "{answer} tokens are reused"
EDIT_A_TOKENS_GUESS = "{guess} tokens"
EDIT_PREDICT_CONTEXT = (
    "B differs from A first at character {pos}; blocks hold {block_size} tokens and B has {tokens} tokens."
)
BT_Q_EVICT = "The next step evicts a cached block. Which one?"
BT_A_EVICT = "block {block} is evicted first"
BT_EVICT_OPTION = "block {block}"
BT_EVICT_PLACEHOLDER = "Pick a block"
BT_PREDICT_SAVED = "Prediction saved: press **Forward** to see the next step."
BT_PREDICT_RESULT_RIGHT = "You predicted block {guess} would be evicted: right, {answer}."
BT_PREDICT_RESULT_WRONG = "You predicted block {guess}; the engine evicted {answer} (the head of the LRU free queue goes first)."
