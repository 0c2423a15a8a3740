package kube

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// followPods calls fn with the pods matching opts (by name) on every
// change, until fn returns true or ctx ends. A broken watch or an API
// server that does not answer is retried: pods outlive both. onErr hears
// of each failed attempt (nil: ignored).
func (b *Backend) followPods(ctx context.Context, opts metav1.ListOptions, fn func(map[string]*corev1.Pod) bool, onErr func(error)) error {
	pods := b.cs.CoreV1().Pods(b.cfg.Namespace)
	retry := func(err error) error {
		if onErr != nil && ctx.Err() == nil {
			onErr(err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
			return nil
		}
	}
	for {
		lctx, cancel := context.WithTimeout(ctx, b.cfg.RequestTimeout)
		list, err := pods.List(lctx, opts)
		cancel()
		if err != nil {
			if err := retry(err); err != nil {
				return err
			}
			continue
		}
		seen := make(map[string]*corev1.Pod, len(list.Items))
		for i := range list.Items {
			seen[list.Items[i].Name] = &list.Items[i]
		}
		if fn(seen) {
			return nil
		}
		wopts := opts
		wopts.ResourceVersion = list.ResourceVersion
		w, err := pods.Watch(ctx, wopts)
		if err != nil {
			if err := retry(err); err != nil {
				return err
			}
			continue
		}
		done, err := drain(ctx, w, seen, fn)
		w.Stop()
		if done || err != nil {
			return err
		}
	}
}

// drain applies w's events to seen until fn is satisfied (true), the
// watch ends (false: list again) or ctx does (its error).
func drain(ctx context.Context, w watch.Interface, seen map[string]*corev1.Pod, fn func(map[string]*corev1.Pod) bool) (bool, error) {
	for {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return false, nil
			}
			pod, isPod := ev.Object.(*corev1.Pod)
			switch {
			case ev.Type == watch.Error || !isPod:
				return false, nil
			case ev.Type == watch.Deleted:
				delete(seen, pod.Name)
			case ev.Type == watch.Added || ev.Type == watch.Modified:
				seen[pod.Name] = pod
			default:
				continue
			}
			if fn(seen) {
				return true, nil
			}
		}
	}
}
