"""The experiment as data: settings and their expansion into trials, the field table
with every setting's parser and limits, the wire model, and what a trial records."""
