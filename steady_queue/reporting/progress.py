"""A plain-text progress bar for long commands."""


class ProgressBar:
    """Redraw one line on a command's stderr: [#####.....] 50% 5,000/10,000 label.

    ``stream`` is a management command's OutputWrapper (it writes no newline
    when given ``ending=""``).
    """

    width = 30

    def __init__(self, stream, total, label):
        self.stream = stream
        self.total = max(total, 1)
        self.label = label
        self.done = 0

    def advance(self, count):
        self.done += count
        filled = min(self.width, self.width * self.done // self.total)
        percent = min(100, 100 * self.done // self.total)
        self.stream.write(
            f"\r[{'#' * filled}{'.' * (self.width - filled)}] {percent:3d}% "
            f"{self.done:,}/{self.total:,} {self.label}",
            ending="",
        )
        self.stream.flush()

    def finish(self):
        self.stream.write("")
        self.stream.flush()
