"""The judged trace in the browser: one page model (`model.build_page`) rendered by one
template, for the API's ``GET /v1/judgments/{key}/view`` and the ``report`` command's run
report. Submodules are imported directly: `source` is light (the store uses it), `render`
loads jinja2."""
