"""The Python enrichment UDF: adds the page category to a click (example code)."""

CATEGORIES = {"/cart": "checkout", "/pay": "checkout", "/search": "discovery"}


class ClickEnricher:
    """Maps a click's path to a category; unknown paths are `other`."""

    def __init__(self, categories=None):
        self.categories = categories or CATEGORIES

    def enrich_click(self, click):
        path = click.get("path", "")
        click["category"] = self.categories.get(path, "other")
        return click
