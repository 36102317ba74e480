"""Small Streamlit components shared by the pages. Logic lives in reviewbert/*."""
