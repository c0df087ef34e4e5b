"""The embedded Job and CronJob controllers, for clusters where no kube-controller-manager runs them."""
