"""kvviz entry point (`make run` = `streamlit run app.py`): the app itself lives in kvviz_app/."""

from kvviz_app.navigation import main

main()
