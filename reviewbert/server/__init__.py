"""The app server's own machinery, without Streamlit (the UI runtime, ``reviewbert.ui.runtime``,
drives it).

- ``model_loading``  a checkpoint loaded in the background while the pages draw
- ``admission``      turns for the heavy page work: first come, first served
- ``allocator``      the C heap's mmap threshold and arenas, so the RSS stops creeping
- ``heap``           long-lived objects kept out of the garbage collector's passes
"""
