"""Finding spans: the query language (`query`), one run (`run_search`), every run (`store_search`)."""
