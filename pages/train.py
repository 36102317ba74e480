"""Train (being built)."""
import streamlit as st

from reviewbert.ui import frame

frame.require()

st.title("Train a model")
