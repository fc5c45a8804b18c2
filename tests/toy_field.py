"""A throwaway swept setting, declared here and nowhere else (tests/test_field_plugin.py
registers it through ``ARCHBENCH_FIELDS``): one identity field with its own training
setting, a column of every table."""

from archbench.core.fields import Field, unless_read_as

NAME = "toy_knob"
FIELDS = (
    Field(name=NAME, choices=("low", "high"), read_as="low", token=unless_read_as("low", "knob{}"),
          legend="knob {}", every_table=True,
          description="a throwaway setting the worker records and nothing reads",
          setting={"swept": True, "omit_default": True,
                   "help": "a throwaway setting the worker records and nothing reads",
                   "axis_help": "A throwaway setting, an axis: low and/or high."}),
)
