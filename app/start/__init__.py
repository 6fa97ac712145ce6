"""The start page (`page`: the page and its controller) and its cards and lists (`items`)."""
