"""The offline plan (`python -m tools.plan`): the real program run under an offline engine.

    stack_file    Pulumi.<stack>.yaml -> the engine's config map
    engine        runs __main__.py under Pulumi mocks and records what it registers
    placeholders  the values only GCP knows after deploy, as the engine invents them and the plan marks them
    model         the plan as data (what --json prints)
    render        the plan as text
    diff          what changed between two plans
    command_line  one shell command line, argument by argument (for render and diff)
"""
