"""The leaves every layer may use: records, metric declarations, devices, files, locks, terminal and
progress output, the numeric mode, fault points and process guards. They import nothing above them."""
