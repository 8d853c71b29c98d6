"""The sweep order: a radius walked up on every axis first, then down on every axis (used by
``direction_order.py`` on MetaSchedule and ``sweep_replay.py`` on AutoTVM's replays)."""


def up_then_down(initialise):
    """``DirectionScores.__init__`` whose natural order is every axis up, then every axis down."""

    def swept(self, dims):
        initialise(self, dims)
        self.natural = sorted(self.natural, key=lambda direction: (-direction[1], direction[0]))

    return swept
