"""DeepEP's EventOverlap on symmesh: what an async_finish call returns. The call runs on a thread
of its own (after every call made before it); current_stream_wait() (or leaving a `with` block)
waits for it and raises what it raised. A call made without async_finish returns an event that
is already done."""


class EventOverlap:
    def __init__(self, event=None, extra_tensors=None):
        self.event = event  # a concurrent.futures.Future, or None when nothing is pending
        self.extra_tensors = extra_tensors  # kept alive until the call is done, as DeepEP does

    def current_stream_wait(self):
        if self.event is not None:
            self.event.result()
        self.extra_tensors = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.current_stream_wait()
