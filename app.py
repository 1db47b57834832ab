"""kvviz entry point (`make run` = `streamlit run app.py`): the app itself lives in kvviz_app/."""

from kvviz.settings import prefer_passive_openmp
from kvviz_app.shell.navigation import main

prefer_passive_openmp()  # before torch is first imported
main()
