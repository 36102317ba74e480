"""Fool the model: a class writes reviews to fool the model, and sees each other's entries live."""
import streamlit as st

from reviewbert.ui import checkpoints, fool, frame

frame.require()

st.title("Fool the model")
st.caption("Write a review, say how many stars you meant, and see whether the model agrees. "
           "Every entry joins the class's board; the ones that fooled it become tests.")

info, predictor = checkpoints.require_predictor()

fool.page(info, predictor)
