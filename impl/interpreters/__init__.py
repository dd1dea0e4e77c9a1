"""One module per transformation, each owning its rule table."""
