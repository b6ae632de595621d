"""Solutions compared by what they compute: a text's steps and claims (`steps`) and a
wrong solution's first wrong step against correct ones (`point`). Above the readers
(`reading`, the rules judge's checker); below the group and the pipeline, which use it."""
