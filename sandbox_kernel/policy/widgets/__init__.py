"""The widget rules of the output policy: comm messages checked against each standard
ipywidgets model's trait types (:mod:`.types`, the table in ``models.json``), state policed
wherever a view puts it into markup, a URL or CSS (:mod:`.state`), and the rules per comm
message (:mod:`.rules`)."""
