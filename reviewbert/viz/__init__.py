"""What every view draws with: the shared figures and theme, the highlighted review, the
bertviz views, and user text made safe for Markdown.

- ``figures``       shared Plotly builders and the app's look (the Predict page's charts,
                    training curves, PNG export)
- ``highlight``     a review as HTML, each word's background as strong as its score
- ``bertviz_view``  bertviz's head view and model view as self-contained offline HTML
- ``markdown``      text from users and files shown as typed, never as formatting
"""
