"""ReviewBERT: the frame (navigation + the sidebar every page shares); pages are in pages/."""
import streamlit as st

st.set_page_config(page_title="ReviewBERT", page_icon="⭐", layout="wide")

from reviewbert.ui import frame  # noqa: E402

frame.run()
