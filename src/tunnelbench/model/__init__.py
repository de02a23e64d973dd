"""The experiment as data: settings, their fields and limits, plan files, the wire model
and the records a trial stores."""
