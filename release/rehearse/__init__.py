"""The release rehearsal: release.yml run here, job by job (`release rehearse`)."""
