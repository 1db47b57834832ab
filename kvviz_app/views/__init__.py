"""Views: a library report turned into the rows and sentences a page shows, in the session's language."""
