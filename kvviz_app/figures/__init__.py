"""Plotly figure builders: plain data in, ``go.Figure`` out. No streamlit here."""
