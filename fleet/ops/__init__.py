"""The write side: agents propose, a person approves, the executor runs it with a restore point first.

catalog (ops and risk levels), policy (the person's rules), proposals (rows and lifecycle), model/coreops/
undo (previews and runs), state (pins and re-validation), restore (restore points), gitexec (git as the
person runs it), service (the entry points every surface calls).
"""
