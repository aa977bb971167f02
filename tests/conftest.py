import os

from hypothesis import HealthCheck, settings

# The default (the README's test command, CI) is derandomized: the same examples every run, so
# a result does not depend on the day. ``PANESTORE_HYPOTHESIS=thorough`` explores at random.
settings.register_profile("default", max_examples=300, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=5000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("PANESTORE_HYPOTHESIS", "default"))
