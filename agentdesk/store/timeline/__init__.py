"""A run's spans as columns for the timeline: numpy arrays and compact strings, not row objects.

`read.span_columns` is the way in; `columns` the result's shape; `packed` our schema's fast read;
`strings` and `id_index` the compact string columns and the id index the layout needs.
"""
