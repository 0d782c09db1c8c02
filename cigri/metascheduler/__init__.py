"""The metascheduler: gather the scenario, allocate fair shares (:mod:`.fairshare`), and hand them
to the campaign schedulers (:mod:`.metascheduler`).

Nothing is imported here: ``gridsub`` uses :mod:`.gangs` alone to check a JDL, and importing a
submodule runs this file first, so an import here would load the whole metascheduler into every
submission.
"""
