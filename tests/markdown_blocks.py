"""Code blocks of a markdown page, run in order the way a reader runs them.

docs/migration.md and docs/facts.md are executed by their tests through this: the blocks
are read from the markdown itself, so a page cannot drift from what runs.
"""
import re

BLOCK = re.compile(r"(?:^(Estimator:|TF2:)\n\n)?^```(\w*)\n(.*?)^```$", re.M | re.S)


def read(path):
    with open(path, encoding="utf-8") as file:
        return file.read()


def sections(text):
    """Section title ("## " heading) -> [(label or None, language, code)], in page order."""
    found = {}
    for part in re.split(r"^## ", text, flags=re.M)[1:]:
        title, _, body = part.partition("\n")
        found[title.strip()] = [m.groups() for m in BLOCK.finditer(body)]
    return found


class Runner:
    """Runs a page's Python blocks in order, each once, in one namespace."""

    def __init__(self, path):
        self.path = path
        self.sections = sections(read(path))
        self.namespace = {"__name__": "markdown_page"}
        self._done = []

    def run_to(self, title):
        """Runs every section up to and including ``title``; returns the namespace."""
        for name, blocks in self.sections.items():
            if name not in self._done:
                for label, language, code in blocks:
                    if language == "python":
                        exec(compile(code, f"{self.path} [{name}: {label or 'setup'}]", "exec"),
                             self.namespace)
                self._done.append(name)
            if name == title:
                return self.namespace
        raise KeyError(title)
